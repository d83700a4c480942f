// Package quota bounds a local-mode workspace's size (opt-in:
// sandbox.local.disk_quota_mb and disk_quota_inodes): an ext4 image
// beside the workspace, loop-mounted on it for the sandbox's life, so a
// write past the quota fails with ENOSPC inside the sandbox and through
// the host file API alike (quota_linux.go: Setup, Disk, Summary;
// loopdev_linux.go attaches the loop device). It needs Linux and root;
// elsewhere a configured quota is refused at Setup.
package quota
