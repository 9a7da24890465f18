package provider

import (
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// hourlyPrice is what one hour of an up machine costs: its price per hour
// and the energy its powerWatts draw in an hour at energyPricePerKWh
// (events.EffectiveCost applies the slot's overrides and reads the older
// template.pricing.nodePerHour). The cost report prices an hour the same way.
func hourlyPrice(g events.GroupSpec, slot *events.Cost) float64 {
	c := events.EffectiveCost(g, slot)
	return events.Num(c.PricePerHour) + events.Num(c.PowerWatts)/1000*events.Num(c.EnergyPricePerKWh)
}

// slotCostOfNode is the cost override of the slot a real node is, nil for a
// template node.
func slotCostOfNode(st *projections.State, n *pb.ExternalGrpcNode) *events.Cost {
	if sl, ok := st.SlotForNode(n.GetName(), n.GetProviderID()); ok {
		return sl.Spec.Cost
	}
	return nil
}
