package handlers

import (
	"fmt"
	"reflect"
)

// Every test of the package checks that a cached slot view is the one a
// fresh build gives: the cache forgets a view only on its slot's events
// (viewcache.go), and a view that depended on anything else would show.
func init() {
	verifyViewCache = func(slot string, cached, fresh slotView) {
		if !reflect.DeepEqual(cached, fresh) {
			panic(fmt.Sprintf("slot %s: cached view %+v, fresh %+v", slot, cached, fresh))
		}
	}
}
