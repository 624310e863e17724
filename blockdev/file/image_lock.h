// Advisory image locks that qemu honours, and that honour qemu's.
//
// qemu's file driver (block/file-posix.c, "locking=auto") does not use flock: it takes Linux
// open-file-description (OFD) read locks on single bytes of the image file. Byte 100 + i says
// "this open uses permission i", byte 200 + i says "this open does not let others use
// permission i", for the permissions consistent-read (0), write (1), write-unchanged (2) and
// resize (3). An open is refused when a byte it needs is held by another open file: a
// permission it wants that someone does not share, or a permission it does not share that
// someone uses. flock and OFD locks do not see each other, so a flock-only tool and qemu can
// both write one image; these locks close that gap in both directions.
//
// What an open of a vstack backing file takes (observed with qemu-io 7.2 in /proc/locks: a
// writable open of a VHD holds 100, 101, 103, 201 and 203; a read-only open 100, 201 and 203):
//   writable:  uses read, write and resize; shares neither write nor resize;
//   read-only: uses read; shares neither write nor resize.
// So two read-only opens coexist, and a writer excludes every other open, vstack's or qemu's;
// `lock=off` skips both the locks and the check, like qemu's force-share (-U).
#ifndef VSTACK_BLOCKDEV_FILE_IMAGE_LOCK_H_
#define VSTACK_BLOCKDEV_FILE_IMAGE_LOCK_H_

#include "lib/errors.h"

namespace vstack {

// Takes the locks of an open (writable or read-only) on `fd`, then checks that no other open
// file description holds a conflicting one. On a conflict the locks taken are released and the
// error (kind EWOULDBLOCK) names the permission in the way, in qemu's words, and whose it is:
// "in use by another process", or "in use by this process" when another descriptor of this
// process holds the file's locks (an open of the same image not closed yet: OFD locks conflict
// within one process too).
Status LockImageFile(int fd, bool writable);

// Releases every lock LockImageFile took on `fd`, and forgets it. Call it before closing a
// descriptor that LockImageFile locked (closing the last descriptor of the open file releases
// the locks as well, but this process would still count the file as locked here; and a
// reference may outlive the close, as io_uring's). Harmless on a descriptor never locked.
void UnlockImageFile(int fd);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_FILE_IMAGE_LOCK_H_
