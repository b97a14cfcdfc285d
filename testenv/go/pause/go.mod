// testenv's own pause binary (the pod sandbox's process): no dependencies.
module cnsreplay.local/testenv/pause

go 1.26.0
