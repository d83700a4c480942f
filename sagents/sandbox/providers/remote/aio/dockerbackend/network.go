package dockerbackend

import (
	"context"
	"fmt"
	"net"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// BridgeGateway returns the host's address on Docker's default bridge
// network (172.17.0.1 usually): a server the host runs for its sandboxes
// (a package index for PIP_INDEX_URL, say) listens there, since a
// container's 127.0.0.1 is its own. The default bridge often states no
// gateway: then it is the IPv4 address of the bridge's host interface
// (com.docker.network.bridge.name, docker0).
func BridgeGateway(ctx context.Context, cli *client.Client) (string, error) {
	n, err := cli.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil {
		return "", fmt.Errorf("docker: inspect the bridge network: %w", err)
	}
	for _, c := range n.IPAM.Config {
		if c.Gateway != "" {
			return c.Gateway, nil
		}
	}
	name := n.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("docker: the bridge network states no gateway and its interface %s: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("docker: addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
			return ip.IP.String(), nil
		}
	}
	return "", fmt.Errorf("docker: the bridge interface %s has no IPv4 address", name)
}
