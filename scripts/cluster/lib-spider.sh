# shellcheck shell=bash disable=SC2034  # CL_* variables are for the caller
# MariaDB sharded with Spider, for scripts/cluster/*.sh (sourced by lib.sh).
CL_SPIDER_PLUGIN=${CL_SPIDER_PLUGIN:-/usr/lib/mysql/plugin/ha_spider.so}
cl_spider_down() { :; }
