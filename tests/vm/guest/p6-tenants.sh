# p6-tenants.sh - point 6: two tenants on one shared hdd device, exports in
# groups weighted 1000 and 100, attached as nbd0/nbd1, direct fio reads on
# both at once: the bandwidth ratio must follow the weights, with cfq and bfq.
#
# NOT YET: the daemon has no per-export groups and no cfq/bfq integration
# (issues 3 and 5).  When it does: write a config with one hdd device
# (scheduler: cfq, then bfq), groups {gold: 1000, bronze: 100}, exports
# gold/bronze with `group:`, run two fio jobs concurrently and step on
# bw(gold) > bw(bronze) for each scheduler.
p6_tenants() {
    vt_skip p6-weighted-tenants "needs per-export groups and cfq/bfq in the daemon (issues 3, 5)"
}
