#!/usr/bin/env bash
# Fires bursts of requests through the demo's Envoy (docker compose up) and
# prints each answer: 200s turning into 429s, with the X-RateLimit-* headers
# Envoy adds from ratewarden's answer and the Retry-After ratewarden sends
# with a denial.
#
#   scripts/demo-burst.sh              # against http://localhost:10000
#   ENVOY_URL=http://host:10000 scripts/demo-burst.sh
set -euo pipefail

url=${ENVOY_URL:-http://localhost:10000}

# burst TITLE COUNT PATH [CURL ARGS...] sends COUNT requests to PATH, one
# after another, and prints the status and rate limit headers of each.
burst() {
  local title=$1 count=$2 path=$3
  shift 3
  echo "== $title"
  echo "   $count requests to $path"
  local i headers status limits
  for ((i = 1; i <= count; i++)); do
    if ! headers=$(curl -sS -o /dev/null -D - "$@" "$url$path"); then
      echo "no answer from $url: is the demo up (docker compose up)?" >&2
      exit 1
    fi
    headers=$(tr -d '\r' <<<"$headers")
    status=$(head -n 1 <<<"$headers" | cut -d ' ' -f 2)
    limits=$(grep -i -E '^(x-ratelimit-[a-z]+|retry-after):' <<<"$headers" | paste -s -d ' ' - || true)
    printf '%4d  %s  %s\n' "$i" "$status" "$limits"
  done
  echo
}

# The example limits are config/edge.yaml.
burst "Logins from one address: 5 in any 60 seconds (sliding window log)" 7 /login
burst "One API key: bursts of 20, refilled at 10 a second (token bucket)" 25 / \
  -H "x-api-key: demo-$RANDOM$RANDOM"
echo "Logins stay limited until the first of them is a minute old; the API key"
echo "is a new one on every run."
