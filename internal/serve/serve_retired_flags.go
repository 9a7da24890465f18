package serve

import "github.com/spf13/pflag"

// addRetiredMemoryFlags adds, hidden, the flags that once tuned the Go
// runtime's memory: the collector's target once serving and the unmapping of
// the executable's pages. serve's memory is bounded by what it holds, under
// the runtime's own settings; a manifest that still sets them keeps starting,
// and each use prints that it does nothing.
func addRetiredMemoryFlags(f *pflag.FlagSet) {
	f.Int("serving-gc-percent", 0, "")
	_ = f.MarkDeprecated("serving-gc-percent", "it does nothing: the collector's target is the Go runtime's (GOGC in the environment sets it)")
	f.Bool("release-code-pages", false, "")
	_ = f.MarkDeprecated("release-code-pages", "it does nothing: serve no longer unmaps its executable's pages")
}
