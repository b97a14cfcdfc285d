// Command cni-eth0 is a CNI plugin (spec 1.0) that creates no interface and no address: it
// only *reports* an interface `eth0` with 127.0.0.1/8 in the pod's network namespace.
// containerd's CRI refuses a sandbox whose CNI result has no IP on an interface named eth0;
// testenv's real node gives pods only `lo` (set up by the loopback plugin that runs before
// this one), and the apiserver accepts 127.0.0.1 as podIP. No bridge, no private address.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

const spec = "1.0.0"

type netConf struct {
	CNIVersion string          `json:"cniVersion"`
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
}

func fail(code int, msg string) {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"cniVersion": spec, "code": code, "msg": msg,
	})
	os.Exit(1)
}

func main() {
	cmd := os.Getenv("CNI_COMMAND")
	switch cmd {
	case "VERSION":
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
			"cniVersion": spec, "supportedVersions": []string{"0.4.0", "1.0.0", "1.1.0"},
		})
		return
	case "DEL", "CHECK", "GC", "STATUS":
		return // nothing was created, nothing to check or remove
	case "ADD":
	default:
		fail(4, fmt.Sprintf("unknown CNI_COMMAND %q", cmd))
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(999, "read stdin: "+err.Error())
	}
	var conf netConf
	if err := json.Unmarshal(in, &conf); err != nil {
		fail(6, "decode network configuration: "+err.Error())
	}
	version := conf.CNIVersion
	if version == "" {
		version = spec
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"cniVersion": version,
		"interfaces": []map[string]any{{"name": "eth0", "sandbox": os.Getenv("CNI_NETNS")}},
		"ips":        []map[string]any{{"address": "127.0.0.1/8", "interface": 0}},
	})
}
