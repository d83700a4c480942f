package dockerbackend

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// BridgeGateway returns the host's address on Docker's default bridge
// network (172.17.0.1 usually): a server the host runs for its sandboxes
// (a package index for PIP_INDEX_URL, say) listens there, since a
// container's 127.0.0.1 is its own.
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
	return "", fmt.Errorf("docker: the bridge network has no gateway address")
}
