#!/usr/bin/env bash
# The README's wire screenshot (docs/src/wire-timeline.png): the "On the wire"
# sections of a run's report.html, alone on a page with the report's own style,
# rendered by headless Chromium.
#
#   shot.sh RUN_DIR OUT.png [WIDTH HEIGHT]
set -euo pipefail
run=$1 out=$2 width=${3:-1100} height=${4:-2400}
page=$(mktemp --suffix=.html)
trap 'rm -f "$page"' EXIT
python3 - "$run/report.html" "$page" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
head = html[: html.index("<body>")]
wire = re.findall(r"<section>\s*<h2>On the wire.*?</section>", html, re.S)
if not wire:
    sys.exit(f"{sys.argv[1]}: no On the wire section")
open(sys.argv[2], "w", encoding="utf-8").write(head + "<body>\n" + "\n".join(wire) + "\n</body></html>\n")
PY
chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run \
  --screenshot="$out" --window-size="$width,$height" "file://$page"
