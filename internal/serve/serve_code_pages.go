package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// releaseCodePagesHelp documents --release-code-pages.
const releaseCodePagesHelp = "once serving has settled, unmap the pages of serve's own executable (code, read-only data) that the start touched; those serving runs come back from the page cache on their next use (Linux; false: keep them mapped)"

// A start runs far more of the binary than serving does: every package's
// initialisation (the Kubernetes client registers every API type), the log's
// replay, the snapshot's decode. The kernel maps each page touched, and its
// neighbours with it, and keeps them mapped for the process's life: a large
// part of a plane's RSS is the executable's pages, of which serving uses only
// some. Executable pages that stay mapped are also the last the kernel
// reclaims, and a container's working set (what the kubelet evicts on) counts
// them. Unmapping them once costs serving a page fault per page it still
// uses, served from the page cache, not the disk; the page cache itself is
// unchanged.

// codeMapping is one mapping of the executable that holds no private
// (written) page: its pages can be dropped and read again from the file.
type codeMapping struct {
	start, end uint64
	rss        int64 // bytes resident when read
}

// errNoCodePages: the platform has no way to drop pages (or no smaps).
var errNoCodePages = errors.New("dropping the executable's pages is supported on Linux only")

// executableCodeMappings reads /proc/self/smaps content and returns the
// mappings of the file exe (as /proc/self/exe names it) that are not
// writable and hold no anonymous page. A mapping a loader wrote to (a
// relocated read-only segment of a position-independent build) holds
// anonymous pages and is left alone: dropping it would bring back the
// file's unrelocated bytes.
func executableCodeMappings(smaps []byte, exe string) ([]codeMapping, error) {
	var out []codeMapping
	var cur *codeMapping
	var anon int64
	keep := func() {
		if cur != nil && anon == 0 {
			out = append(out, *cur)
		}
		cur, anon = nil, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping's header line
			keep()
			if len(f) < 6 || strings.Join(f[5:], " ") != exe || strings.Contains(f[1], "w") {
				continue
			}
			lo, hi, ok := strings.Cut(f[0], "-")
			if !ok {
				return nil, fmt.Errorf("smaps: mapping %q: want start-end", f[0])
			}
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || b <= a {
				return nil, fmt.Errorf("smaps: mapping %q: not a hex address range", f[0])
			}
			cur = &codeMapping{start: a, end: b}
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Rss:", "Anonymous:":
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb < 0 {
				return nil, fmt.Errorf("smaps: %s %q: not a size", f[0], f[1])
			}
			if f[0] == "Rss:" {
				cur.rss = kb << 10
			} else {
				anon = kb
			}
		}
	}
	keep()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return out, nil
}

// releaseCodePages drops serve's resident executable pages (see above) and
// logs what it released.
func releaseCodePages(log *slog.Logger) {
	mappings, err := dropExecutableCodePages()
	if errors.Is(err, errNoCodePages) {
		log.Debug("executable's pages left mapped", "err", err)
		return
	}
	if err != nil {
		log.Warn("executable's pages left mapped", "err", err)
		return
	}
	var rss, size int64
	for _, m := range mappings {
		rss += m.rss
		size += int64(m.end - m.start)
	}
	log.Info("executable's pages unmapped", "resident_mib", rss>>20, "mapped_mib", size>>20, "mappings", len(mappings))
}
