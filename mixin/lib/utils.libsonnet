// Small helpers shared by the alerts, rules and dashboards (no external libraries).
{
  // `n unit` or `n units`: the text of a count in a sentence.
  plural(n, unit):: '%d %s%s' % [n, unit, if n == 1 then '' else 's'],

  // 600 -> '10 minutes', 90 -> '90 seconds', 7200 -> '2 hours': for static summaries.
  secondsText(seconds)::
    if seconds % 3600 == 0 then self.plural(seconds / 3600, 'hour')
    else if seconds % 60 == 0 then self.plural(seconds / 60, 'minute')
    else self.plural(seconds, 'second'),

  // A Prometheus duration ('30m', '3m', '1h30m', '14d') as whole seconds. Every duration of
  // _config is one of these (config.libsonnet); tools/render_mixin.py checks an override's
  // form before the mixin sees it, this assert stands for users of the mixin in their own
  // jsonnet.
  durationSeconds(duration)::
    local per = { s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
    local step(acc, char) =
      if std.member('0123456789', char) then acc { digits: acc.digits + char }
      else if std.objectHas(per, char) && acc.digits != '' then
        acc { digits: '', seconds: acc.seconds + std.parseInt(acc.digits) * per[char] }
      else acc { bad: true };
    local read = std.foldl(step, std.stringChars(duration), { digits: '', seconds: 0, bad: false });
    assert std.isString(duration) && duration != '' && !read.bad && read.digits == '' :
           'duration %s: a Prometheus duration such as 3m, 1h30m or 14d (units s, m, h, d, w, y)' % std.toString(duration);
    read.seconds,

  // '30m' -> '30 minutes'.
  durationText(duration):: self.secondsText(self.durationSeconds(duration)),
}
