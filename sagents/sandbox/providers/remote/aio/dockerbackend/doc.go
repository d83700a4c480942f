// Package dockerbackend runs AIO sandboxes as Docker containers through
// the Docker Engine API (github.com/docker/docker/client; the docker CLI
// is never run). Importing it registers the backend "docker" with
// orchestrator.RegisterBackend.
//
// A sandbox's container is named <prefix>-<sandbox id> and labelled with
// the sandbox id, the thread id, the owner id and the prefix. Its API
// port is published on 127.0.0.1 with host port 0, so Docker picks a free
// port (no allocator of ours, no race); the port is read back from
// inspect. Discover finds a sandbox by name and returns its container id,
// so Destroy of a recovered sandbox stops the right container. A name
// conflict on create means another process won the race: its container is
// adopted. Every failure after create removes the container.
//
// BuildImage builds the sage-sandbox image (FROM scratch, a static sage
// binary running `sage sandboxd --mode passthrough`, busybox for a shell)
// with no registry.
//
// Its API: New and NewChecked (Options, DefaultPrefix, the Key* names of
// provider_config it reads) and *Backend, an orchestrator.Backend; the
// Label* names on every container; NewClient and BridgeGateway; BuildImage
// (BuildOptions) and BuildFullImage (FullOptions, RootfsOptions,
// DefaultPackages). How an image is built (its recipe, the debootstrap
// cache, the apt mirror) is the package's own.
package dockerbackend
