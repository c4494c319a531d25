// Small helpers shared by the alerts, rules and dashboards (no external libraries).
{
  // `n unit` or `n units`: the text of a count in a sentence.
  plural(n, unit):: '%d %s%s' % [n, unit, if n == 1 then '' else 's'],

  // 600 -> '10 minutes', 90 -> '90 seconds', 7200 -> '2 hours': for static summaries.
  secondsText(seconds)::
    if seconds % 3600 == 0 then self.plural(seconds / 3600, 'hour')
    else if seconds % 60 == 0 then self.plural(seconds / 60, 'minute')
    else self.plural(seconds, 'second'),

  // A Prometheus duration of one unit ('30m', '10m', '2h', '45s') as seconds.
  durationSeconds(duration)::
    local unit = duration[std.length(duration) - 1];
    local count = std.parseInt(duration[0:std.length(duration) - 1]);
    local per = { s: 1, m: 60, h: 3600, d: 86400 };
    assert std.objectHas(per, unit) : 'duration %s: use one of s, m, h, d' % duration;
    count * per[unit],

  // '30m' -> '30 minutes'.
  durationText(duration):: self.secondsText(self.durationSeconds(duration)),
}
