package executor

// ResourceConfig is the SageMaker training toolkit's resourceconfig.json,
// which every executor writes into a job's input/config directory for each
// of its hosts: the host it runs on, all the hosts of the attempt, and one
// instance group holding them.
type ResourceConfig struct {
	CurrentHost  string          `json:"current_host"`
	CurrentType  string          `json:"current_instance_type"`
	CurrentGroup string          `json:"current_group_name"`
	Hosts        []string        `json:"hosts"`
	Groups       []InstanceGroup `json:"instance_groups"`
	Network      string          `json:"network_interface_name"`
}

// InstanceGroup is one instance group of a ResourceConfig.
type InstanceGroup struct {
	Name  string   `json:"instance_group_name"`
	Type  string   `json:"instance_type"`
	Hosts []string `json:"hosts"`
}

// HomogeneousCluster is the name of the one instance group of an attempt:
// qshare's attempts hold instances of one type.
const HomogeneousCluster = "homogeneousCluster"

// NewResourceConfig returns the resourceconfig.json of host, one of hosts,
// all of instanceType, whose network interface is network.
func NewResourceConfig(host, instanceType string, hosts []string, network string) ResourceConfig {
	return ResourceConfig{CurrentHost: host, CurrentType: instanceType, CurrentGroup: HomogeneousCluster, Hosts: hosts,
		Groups: []InstanceGroup{{Name: HomogeneousCluster, Type: instanceType, Hosts: hosts}}, Network: network}
}
