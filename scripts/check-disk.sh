#!/usr/bin/env bash
# Fail, with one line, unless each file system holding a given directory has at least
# MQSTORE_TEST_DISK_FREE_GIB_MIN GiB free (default 20) and is at most
# MQSTORE_TEST_DISK_USED_PERCENT_MAX percent used (default 75, where mqstore's and
# RocketMQ's retention start deleting).  Usage: check-disk.sh DIR...
set -euo pipefail
free_gib_min="${MQSTORE_TEST_DISK_FREE_GIB_MIN:-20}"
used_percent_max="${MQSTORE_TEST_DISK_USED_PERCENT_MAX:-75}"
for directory in "$@"; do
    read -r used_kib free_kib < <(df -Pk "$directory" | awk 'NR == 2 {print $3, $4}')
    free_gib=$(( free_kib / 1024 / 1024 ))
    used_percent=$(( 100 * used_kib / (used_kib + free_kib) ))
    if (( free_gib < free_gib_min || used_percent > used_percent_max )); then
        echo "check-disk: $directory has ${free_gib} GiB free, ${used_percent}% used; the" \
             "tests need ${free_gib_min} GiB free and at most ${used_percent_max}% used" \
             "(free space, or set MQSTORE_TEST_DISK_FREE_GIB_MIN /" \
             "MQSTORE_TEST_DISK_USED_PERCENT_MAX)" >&2
        exit 2
    fi
    echo "check-disk: $directory: ${free_gib} GiB free, ${used_percent}% used"
done
