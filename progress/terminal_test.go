//go:build linux

package progress

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the controller (what a terminal emulator reads) and the
// terminal a program writes to.
func openPTY(t *testing.T) (controller, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	controller = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { controller.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 60}); err != nil {
		t.Fatalf("set pty size: %v", err)
	}
	return controller, tty
}

// On a real terminal the Printer draws a live bar cut to the terminal's width; on a file it prints
// lines.
func TestTerminalDetection(t *testing.T) {
	controller, tty := openPTY(t)
	p := New(tty, "train", 40, 0)
	if !p.live || p.width != 60 {
		t.Fatalf("on a terminal of 60 columns: live %v width %d", p.live, p.width)
	}
	p.Step(1, F("reward", 0.5))
	buf := make([]byte, 256)
	n, err := controller.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	got := string(buf[:n])
	if !strings.HasPrefix(got, "\r\x1b[Ktrain [") || len(got) > len("\r\x1b[K")+59 {
		t.Errorf("terminal got %q: want a bar redrawn in place, at most 59 columns", got)
	}

	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if New(f, "train", 40, 0).live {
		t.Error("a file is taken for a terminal")
	}
}
