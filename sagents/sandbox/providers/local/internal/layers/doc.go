// Package layers stacks a session sandbox's workspace as overlayfs layers
// kept on the host, for local mode's checkpoints (checkpoint_linux.go in
// package local).
//
// The mounts are made from outside the sandbox: the sandboxed code never
// gets mount rights. A session sandbox's mount namespace belongs to the
// user namespace bwrap creates first (A); its commands run in a nested one
// (B, --disable-userns) with no capability in A. Entering A takes a
// single-threaded process (setns(CLONE_NEWUSER)), which a Go program is
// not, so the host starts the agent (Main, this program re-executed under
// the name Name) through bwrap --userns A: bwrap, in C, enters A and runs
// the agent with A's capabilities in a mount namespace of its own where
// the host's tree is bound. The agent builds each overlay there, where the
// layers' host paths resolve (fsopen, fsconfig lowerdir+, fsmount: a
// detached mount), and attaches it in the sandbox's mount namespace:
// beneath the current workspace mount (MOVE_MOUNT_BENEATH), which it then
// detaches, so the workspace is never missing. The agent serves on one OS
// thread with a file-system context of its own (unshare(CLONE_FS)), which
// enters the sandbox's mount namespace for each freeze and attach and
// comes back to the agent's for each build (setns(CLONE_NEWNS)). It hands every mount it
// makes to the host as a descriptor (SCM_RIGHTS), through which the host's
// file operations reach the same state as commands.
//
// A sandbox's /tmp is layered the same way, its layers in memory: Store
// mounts a tmpfs of /tmp's size in the agent's own mount namespace (the
// sandbox never sees it), whose root the host reaches by a descriptor;
// Mount attaches the workspace's and /tmp's overlays in one request, Swap
// freezes the live ones first in the same request (a checkpoint, a
// rollback), and Freeze and Thaw name the targets they act on. Prepare
// builds overlays ahead, between commands, for a later Mount or Swap of
// the same layouts, which then only attaches them (the build, overlayfs
// setting up its work directory in the upper, is what a mount cost most).
//
// Apply and Copy work on the host side: Apply writes one overlay upper
// layer (whiteouts, opaque directories) onto a directory, Copy copies a
// tree (bytes, modes, symlinks).
package layers
