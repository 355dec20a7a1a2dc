package plan

import (
	"reflect"
	"testing"
)

// TestRuntimeTraits: what the layers above the engine ask of a runtime
// instead of its name, row by row.
func TestRuntimeTraits(t *testing.T) {
	// A runtime is known exactly when it has traits: every known one has
	// default network and data.
	tests := []struct {
		desc string
		rt   Runtime
		want RuntimeTraits
	}{
		{"host: processes of this machine, host network, a host directory", RuntimeHost,
			RuntimeTraits{Processes: true, Network: NetworkHost, Data: DataBind, Networks: []NetworkMode{NetworkHost}, Placements: []DataPlacement{DataBind, DataTmpfs}}},
		{"docker: images, the isolate controller, a published port on the writable layer; the container's IP its own address", RuntimeDocker,
			RuntimeTraits{Images: true, Isolate: true, Network: NetworkPublished, Data: DataLayer, OwnAddress: NetworkContainerIP, EngineKnobs: true,
				Networks: []NetworkMode{NetworkHost, NetworkPublished, NetworkPublishedExternal, NetworkContainerIP}, Placements: []DataPlacement{DataLayer, DataVolume, DataBind, DataTmpfs}}},
		{"podman: images, a published port on the writable layer, the container's IP its own address; no isolate controller; needs podman", RuntimePodman,
			RuntimeTraits{Images: true, Network: NetworkPublished, Data: DataLayer, OwnAddress: NetworkContainerIP, Program: "podman",
				Networks: []NetworkMode{NetworkHost, NetworkPublished, NetworkPublishedExternal, NetworkContainerIP}, Placements: []DataPlacement{DataLayer, DataVolume, DataBind, DataTmpfs}}},
		{"kubernetes: images (pods), the isolate controller as a DaemonSet, the pod's IP, its root filesystem; a cluster network, numeric users", RuntimeKubernetes,
			RuntimeTraits{Images: true, Isolate: true, Network: NetworkPodIP, Data: DataLayer, OwnAddress: NetworkPodIP, ClusterNetwork: true, NumericUser: true, Cluster: true,
				Networks: []NetworkMode{NetworkPodIP, NetworkService, NetworkNodePort, NetworkHostNetwork}, Placements: []DataPlacement{DataLayer, DataEmptyDir, DataEmptyDirMemory, DataHostPath, DataLocalPV}}},
		{"vm: the guest's processes, at the guest's address, data on its disk", RuntimeVM, RuntimeTraits{Processes: true, Guest: true, Network: NetworkHost, Data: DataBind,
			Networks: []NetworkMode{NetworkHost}, Placements: []DataPlacement{DataBind, DataTmpfs}}},
		{"an unknown runtime has no traits", "kvm", RuntimeTraits{}},
		{"no runtime has no traits", "", RuntimeTraits{}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.rt.Traits(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Traits() = %+v, want %+v", got, tc.want)
			}
			if got, want := tc.rt.Known(), !reflect.DeepEqual(tc.want, RuntimeTraits{}); got != want {
				t.Errorf("Known() = %v, want %v", got, want)
			}
		})
	}
}

// TestEveryRuntimeHasItsDefaults: a runtime added to the table is a name
// the plan accepts and gets a network and a data placement the plan knows.
func TestEveryRuntimeHasItsDefaults(t *testing.T) {
	for _, name := range runtimeNames() {
		t.Run(name, func(t *testing.T) {
			tr := Runtime(name).Traits()
			if !contains(networks, string(tr.Network)) || !contains(placements, string(tr.Data)) {
				t.Errorf("defaults network %q, data %q: not among %v, %v", tr.Network, tr.Data, networks, placements)
			}
			if tr.Processes && tr.Images {
				t.Error("services are either processes of this machine or run from images")
			}
		})
	}
}
