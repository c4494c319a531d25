// Folding the replicas of an HA pair (_config.replicaLabels, config.libsonnet): two exporters
// polling the same nodes are one logical exporter. Their series carry the same
// exporterInstanceLabels and differ only by the replica labels, so an aggregation `without`
// those labels leaves one series per logical exporter, node and chain, with every other label
// (a node's static labels too) kept. Every raw series an alert, recording rule or dashboard
// reads goes through `fold`; after it the rest of the expression (its `on(job, instance, ...)`
// matches, its `count by`) can neither count a node twice nor meet "duplicate series" in a
// one-to-one match. On a single exporter (no replica label) a fold changes nothing but the
// metric name, which no alert or match reads.
//
// How to fold is the meaning of the value: `max` where any replica's word is enough (a node
// is up when any replica reaches it; the most recent height change any replica saw, so a
// chain is stalled only when the replicas agree), `min` where both must agree (behind,
// syncing, work waiting). A counter's increase is folded OUTSIDE its range function
// (`max without(...) (increase(x[w]))`): each replica's counter is its own, with its own
// resets, and summing them would count every event twice.

// The replica labels as a list: `c` is the mixin's _config (its replicaLabels) or the labels
// themselves, a comma-separated string ('exporter_replica'; '' folds nothing).
local labels(c) =
  local text = if std.isObject(c) then c.replicaLabels else c;
  assert std.isString(text) : 'replicaLabels: a comma-separated list of labels, such as "exporter_replica"';
  std.filter(function(l) l != '', std.map(function(l) std.stripChars(l, ' \n'), std.split(text, ',')));

{
  labels(c):: labels(c),

  // The labels as PromQL lists them ('exporter_replica'), for `by (...)`, `ignoring(...)`.
  list(c):: std.join(', ', labels(c)),

  // `expr` (a PromQL expression with one series per replica) folded to one per logical
  // exporter by `how` (max, min, sum...): '<how> without(<labels>) (<expr>)'. Unchanged when
  // there is no replica label to fold.
  fold(c, expr, how='max')::
    if labels(c) == [] then expr
    else '%s without(%s) (%s)' % [how, $.list(c), std.rstripChars(expr, '\n')],

  // The one common read: `metric{s}` folded.
  read(c, metric, s, how='max'):: $.fold(c, '%s{%s}' % [metric, s], how),

  // A function over a range of a raw series (increase, changes, min_over_time...), folded
  // outside it: 'max without(r) (f(metric{s}[window]))'.
  range(c, f, metric, s, window, how='max'):: $.fold(c, '%s(%s{%s}[%s])' % [f, metric, s, window], how),
}
