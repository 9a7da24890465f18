package kube

// CountFullChecks counts into n the times c's Settle asks the fake for
// every Node and Job version (the full check). Without the change log
// (changes false) every Settle after a write makes a full check.
func CountFullChecks(c *Cluster, n *int, changes bool) {
	versions := c.settle.versions
	c.settle.versions = func() (map[string]string, map[string]string) { *n++; return versions() }
	if !changes {
		c.settle.changes = func(uint64) ([]Change, bool) { return nil, false }
	}
}
