#!/bin/bash
# The table of docs/partition.md, "Measured: GraphPipe against the
# sequential pipeline": per model (model|attributes|loss flag), GraphPipe's
# and the sequential pipeline's plans at 8 devices (NVLink, PCIe), 16 and 32.
set -e
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/tofuc
go build -o "$bin" ./cmd/tofuc
while IFS='|' read -r m sets loss; do
  for tc in "h100-nvlink 8" "pcie 8" "h100-2x8-ib 16" "h100-4x8-ib 32"; do
    set -- $tc
    args=""
    for s in $sets; do args="$args --set $s"; done
    out=$("$bin" partition examples/$m.tdl --train $loss $args --devices $2 --topology $1 --pipeline 2>&1)
    gp=$(echo "$out" | grep -E '^  graphpipe ' | head -1 | tr -s ' ')
    sq=$(echo "$out" | grep -E '^  sequential ' | head -1 | tr -s ' ')
    r=$(echo "$out" | grep -o 'throughput: [0-9.]*' | head -1)
    st=$(echo "$out" | grep -o 'step time  *[0-9.]* [mµ]*s' | head -1)
    echo "$m [$sets] $1 $2 | gp:$gp | sq:$sq | $r | partition $st"
  done
done <<'LIST'
multimodal||
dlrm||--loss mse
uno||--loss mse
multimodal|hidden=1024 heads=16 layers=4 batch=64 text_len=128 patches=196 frames=256|
dlrm|batch=2048 rows=1000000 dim=128 hidden=1024|--loss mse
uno|batch=512|--loss mse
LIST
