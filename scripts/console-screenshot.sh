#!/usr/bin/env bash
# Makes docs/console.png: runs the browser test of the console's schema panel
# (tests/it/console.rs, headless Chromium through chromedriver; install them with
# `apt-get install chromium chromium-driver`), which saves a screenshot at its end. The demo's
# texts hold CJK characters: install a font for them first (`apt-get install fonts-wqy-microhei`).
set -euo pipefail
cd "$(dirname "$0")/.."
APIJET_CONSOLE_SCREENSHOT="$PWD/docs/console.png" \
  cargo test --test it -- --exact --nocapture \
  console::console_schema_panel_shows_tables_columns_and_roles_in_chromium
echo "wrote docs/console.png"
