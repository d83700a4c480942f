#!/usr/bin/env bash
# step: redis-server on 127.0.0.1:6379
# Starts redis-server on 127.0.0.1:6379 (daemonized, no persistence) for
# the aio provider's redis state store tests, unless one answers PING.
set -euo pipefail
if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
	exit 0
fi
echo "starting redis-server on 127.0.0.1:6379"
redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no \
	--logfile /tmp/sage-redis-6379.log --pidfile /tmp/sage-redis-6379.pid
for _ in $(seq 50); do
	redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG && exit 0
	sleep 0.1
done
echo "setup: redis-server did not answer PING; see /tmp/sage-redis-6379.log" >&2
exit 1
