#!/bin/sh
# Regenerates the HEP fixtures in this directory (kamailio-*.hep) from a real
# Kamailio: a sipp UAC calls a sipp UAS through the stateless Kamailio of
# kamailio.cfg, which mirrors every message as HEPv3 to hepcapture.
# Needs the Debian packages kamailio and sip-tester. Everything is on 127.0.0.1
# (ports 5070 Kamailio, 5080 UAS, 5090 UAC, 9060 HEP). Run from anywhere:
#   sh translators/sip/hep/testdata/regenerate.sh
# The fixtures' timestamps, Call-ID and branches change with every run, so
# hep_test.go's expectations for them must be updated with it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
module=$(cd "$here/../../../.." && pwd)
work=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	[ -f "$work/kamailio.pid" ] && kill "$(cat "$work/kamailio.pid")" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$module" && go build -o "$work/hepcapture" ./translators/sip/hep/testdata/hepcapture)
mkdir "$work/out"
"$work/hepcapture" -listen 127.0.0.1:9060 -out "$work/out" -idle 3s &
capture=$!
pids="$capture"

sipp -sn uas -i 127.0.0.1 -p 5080 -nostdin -trace_err -error_file "$work/uas.err" </dev/null >/dev/null 2>&1 &
pids="$pids $!"
kamailio -f "$here/kamailio.cfg" -P "$work/kamailio.pid" -Y "$work" -E 2>"$work/kamailio.log"
sleep 1
sipp -sn uac -i 127.0.0.1 -p 5090 -m 1 -l 1 -s 1001 -nostdin -trace_err -error_file "$work/uac.err" 127.0.0.1:5070 </dev/null >/dev/null 2>&1
wait "$capture"

rm -f "$here"/kamailio-*.hep
for f in "$work"/out/*.hep; do
	cp "$f" "$here/kamailio-$(basename "$f")"
done
ls -l "$here"/kamailio-*.hep
