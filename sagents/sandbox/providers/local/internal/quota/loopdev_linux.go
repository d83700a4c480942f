//go:build linux

package quota

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// reopenSame opens f's file again (a new open file description),
// checking that the name still leads to the same file.
func reopenSame(f *os.File) (*os.File, error) {
	fd, err := unix.Open(f.Name(), unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err == nil {
		err = unix.Fstat(int(f.Fd()), &b)
	}
	if err != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(fd)
		return nil, fmt.Errorf("replaced while in use: %w", fs.ErrPermission)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// attachLoop binds the image fd to a free loop device, with autoclear.
func attachLoop(img int) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	var last error
	for range 20 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("loop-control: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(img)}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) { // before Linux 5.8
			if err = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, img); err == nil {
				info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}
				if err = unix.IoctlLoopSetStatus64(int(dev.Fd()), &info); err != nil {
					unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
				}
			}
		}
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("set up %s: %w", dev.Name(), err)
		}
		last = err
	}
	return nil, fmt.Errorf("no free loop device: %w", last)
}
