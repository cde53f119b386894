# shellcheck shell=bash
# Where cargo puts what it builds, found the way cargo finds it. Source this file; it defines
# functions and sets no options of its own.
#
#   cargo_target_dir     print the build folder: `cargo metadata`'s target_directory, which
#                        honours CARGO_TARGET_DIR, `build.target-dir` in .cargo/config.toml and
#                        the workspace's default `target/` (run from inside the workspace)
#   cargo_bin PROFILE    print the path of the apijet binary of PROFILE (debug, release): the
#                        build folder's PROFILE/apijet, whether it is built yet or not

cargo_target_dir() {
  cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

cargo_bin() {
  local dir
  dir=$(cargo_target_dir) || return 1
  printf '%s/%s/apijet\n' "$dir" "${1:-debug}"
}
