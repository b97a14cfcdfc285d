// testenv's own CNI plugin: reports eth0 = 127.0.0.1/8 and creates nothing. No dependencies.
module cnsreplay.local/testenv/cni-eth0

go 1.26.0
