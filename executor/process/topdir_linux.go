package process

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopdirFL is FS_TOPDIR_FL of <linux/fs.h>: chattr's 'T' attribute.
const fsTopdirFL = 0x00020000

// markTopDir sets the "top of directory hierarchies" attribute (chattr +T)
// on dir, where the file system has it (ext3, ext4). It tells the Orlov
// allocator that dir's subdirectories are unrelated, as the users' under
// /home are: each job's (or attempt's) directory goes to a block group
// chosen for it, with its own files after it, instead of all of them
// crowding the group of dir. Creating a file or directory is what an
// attempt costs most, and a crowded group costs the more: on an ext4
// without a journal every new inode is searched for past the group's
// recently deleted ones. Elsewhere it fails, and nothing changes.
func markTopDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if flags&fsTopdirFL != 0 {
		return nil
	}
	return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFL))
}
