// Dotted versions compared in a label matcher. PromQL cannot compare versions, so the
// mixin writes, from a minimum such as '1.4.2', the regex of every version below it
// (LedgerNodeVersionBelowMinimum). Components are compared as numbers from the left; a
// leading `v` is allowed and what follows the compared components after a character other
// than a digit or a dot (`-rc1`, `+build`) is ignored, so '1.4.2-rc1' counts as 1.4.2. A
// version with fewer components is padded with zeros ('1.4' is 1.4.0).
local digits(n) = std.map(function(c) std.parseInt(c), std.stringChars(n));

// A character class of the digits from..to ('[0-3]', '5').
local span(from, to) =
  if from == to then '%d' % from else '[%d-%d]' % [from, to];

// Alternatives of the regex matching a whole number (no leading zero) below n (a string of
// digits): every number with fewer digits, then, digit by digit, n's prefix followed by a
// smaller digit and any digits. Empty for '0'.
local below(n) =
  local d = digits(n);
  local k = std.length(d);
  local shorter =
    if k == 1 then []
    else if k == 2 then ['[0-9]']
    else ['[0-9]', '[1-9][0-9]{0,%d}' % (k - 2)];
  local at(i) =
    local lowest = if i == 0 && k > 1 then 1 else 0;
    if d[i] - 1 < lowest then []
    else ['%s%s%s' % [n[0:i], span(lowest, d[i] - 1), if k - i - 1 > 0 then '[0-9]{%d}' % (k - i - 1) else '']];
  shorter + std.flattenArrays([at(i) for i in std.range(0, k - 1)]);

{
  // The regex (anchored by PromQL's =~) of the versions below `minimum`, a dotted version of
  // whole numbers ('1.4.2'); empty when nothing is below it ('0.0').
  belowRegex(minimum)::
    local parts = std.split(minimum, '.');
    assert std.length(parts) > 0 && std.all([std.length(p) > 0 && std.all([std.member('0123456789', c) for c in std.stringChars(p)]) for p in parts]) :
           "minimumNodeVersion '%s': use dotted whole numbers such as '1.4.2'" % minimum;
    local escaped(i) = std.join('\\.', parts[0:i]);
    local prefix(i) = if i == 0 then '' else escaped(i) + '\\.';
    // the part below the minimum's at position i, the parts before it equal
    local lower(i) =
      local alternatives = below(parts[i]);
      if alternatives == [] then []
      else ['%s(?:%s)' % [prefix(i), std.join('|', alternatives)]];
    // a version that stops after i equal parts where the minimum goes on above zero
    local shorter(i) =
      if std.all([std.parseInt(p) == 0 for p in parts[i:]]) then [] else [escaped(i)];
    local lowers = std.flattenArrays([lower(i) for i in std.range(0, std.length(parts) - 1)]);
    local shorters = std.flattenArrays([shorter(i) for i in std.range(1, std.length(parts) - 1)]);
    local group(alternatives) = std.join('|', std.map(function(a) '(?:%s)' % a, alternatives));
    // a lower part may be followed by any further parts; a shorter version by none
    local versions =
      (if lowers == [] then [] else ['(?:%s)(?:\\.[0-9]+)*' % group(lowers)])
      + (if shorters == [] then [] else ['(?:%s)' % group(shorters)]);
    if versions == [] then ''
    else 'v?(?:%s)(?:[^0-9.].*)?' % std.join('|', versions),
}
