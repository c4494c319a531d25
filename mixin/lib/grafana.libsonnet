// Small builders for the dashboards' JSON (instead of a network-fetched grafonnet): each
// panel as Grafana 10/11 saves it, so a provisioned dashboard loads and saves without a diff
// and validates against Grafana's JSON schema.
local datasource = { type: 'prometheus', uid: '${datasource}' };
local refIds = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

// Thresholds: a base colour, then [value, colour] steps.
local thresholds(base, steps=[]) = {
  mode: 'absolute',
  steps: [{ color: base, value: null }] + [{ color: s[1], value: s[0] } for s in steps],
};

// Targets get their refId from their position: A, B, C...
local withRefIds(targets) = [targets[i] { refId: refIds[i] } for i in std.range(0, std.length(targets) - 1)];

local panel(type, id, title, description, unit, targets, size) = {
  assert description != '' : 'panel %s needs a description' % title,
  type: type,
  title: title,
  description: description,
  datasource: datasource,
  targets: withRefIds(targets),
  id: id,
  gridPos: { w: size[0], h: size[1] },
  fieldConfig: { defaults: { unit: unit }, overrides: [] },
};

{
  thresholds:: thresholds,

  // A value mapping for 0/1 series: [[text, colour] of 0, [text, colour] of 1].
  boolMapping(off, on):: [{
    type: 'value',
    options: {
      '0': { text: off[0], color: off[1], index: 0 },
      '1': { text: on[0], color: on[1], index: 1 },
    },
  }],

  // A range query drawn over time.
  target(expr, legend):: {
    datasource: datasource,
    editorMode: 'code',
    expr: expr,
    legendFormat: legend,
    range: true,
    instant: false,
  },

  // An instant query read as a table (one row per series, labels as columns).
  tableTarget(expr):: {
    datasource: datasource,
    editorMode: 'code',
    expr: expr,
    legendFormat: '__auto',
    range: false,
    instant: true,
    format: 'table',
  },

  row(id, title):: {
    id: id,
    type: 'row',
    title: title,
    collapsed: false,
    gridPos: { w: 24, h: 1 },
    panels: [],
  },

  stat(id, title, description, targets, unit='none', steps=thresholds('blue'), mappings=[], size=[6, 4])::
    panel('stat', id, title, description, unit, targets, size) {
      fieldConfig+: { defaults+: { color: { mode: 'thresholds' }, thresholds: steps, mappings: mappings } },
      options: {
        reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
        colorMode: 'background',
        graphMode: 'none',
        textMode: 'auto',
        orientation: 'auto',
        justifyMode: 'auto',
        wideLayout: true,
        showPercentChange: false,
        percentChangeColorMode: 'standard',
      },
    },

  // softMin: the y axis starts at 0 unless a value is below it (counts, durations, rates).
  timeseries(id, title, description, targets, unit='none', softMin=true, fill=10, size=[12, 8])::
    panel('timeseries', id, title, description, unit, targets, size) {
      fieldConfig+: {
        defaults+: {
          color: { mode: 'palette-classic' },
          custom: {
            drawStyle: 'line',
            lineWidth: 1,
            fillOpacity: fill,
            showPoints: 'never',
            spanNulls: false,
          } + (if softMin then { axisSoftMin: 0 } else {}),
          thresholds: thresholds('green'),
        },
      },
      options: {
        legend: { displayMode: 'list', placement: 'bottom', showLegend: true, calcs: [] },
        tooltip: { mode: 'multi', sort: 'desc' },
      },
    },

  // A 0/1 series per row, coloured by its mapping.
  stateTimeline(id, title, description, targets, mappings, size=[12, 8])::
    panel('state-timeline', id, title, description, 'none', targets, size) {
      fieldConfig+: {
        defaults+: {
          color: { mode: 'thresholds' },
          custom: { fillOpacity: 80, lineWidth: 0 },
          thresholds: thresholds('green'),
          mappings: mappings,
        },
      },
      options: {
        alignValue: 'left',
        legend: { displayMode: 'list', placement: 'bottom', showLegend: false, calcs: [] },
        mergeValues: true,
        rowHeight: 0.9,
        showValue: 'auto',
        tooltip: { mode: 'single', sort: 'none' },
      },
    },

  // organize: the columns in order, others hidden; renames: {column: header}.
  table(id, title, description, targets, columns, hide=['Value'], renames={}, cellType='auto', mappings=[], merge=false, size=[12, 8])::
    panel('table', id, title, description, 'none', targets, size) {
      fieldConfig+: {
        defaults+: {
          color: { mode: 'thresholds' },
          thresholds: thresholds('green'),
          mappings: mappings,
          // A colored background with its mode and applyToRow: the schema cannot tell a bare
          // { type } from other cell types.
          custom: {
            align: 'auto',
            cellOptions: { type: cellType } + (if cellType == 'color-background' then { mode: 'basic', applyToRow: false } else {}),
            inspect: false,
          },
        },
      },
      options: {
        frameIndex: 0,
        showHeader: true,
        cellHeight: 'sm',
        footer: { show: false, reducer: ['sum'], fields: '', countRows: false },
      },
      transformations: (if merge then [{ id: 'merge', options: {} }] else []) + [{
        id: 'organize',
        options: {
          excludeByName: { [name]: true for name in ['Time', '__name__'] + hide },
          indexByName: { [columns[i]]: i for i in std.range(0, std.length(columns) - 1) },
          renameByName: renames,
        },
      }],
    },

  // Places panels left to right in rows of 24 columns, a row panel on a line of its own; a
  // panel that does not fit on the current line starts the next one below the tallest
  // panel of the line.
  layout(panels)::
    local step(state, p) =
      local w = p.gridPos.w;
      local h = p.gridPos.h;
      local wraps = state.x + w > 24 || p.type == 'row';
      local x = if wraps then 0 else state.x;
      local y = if wraps then state.y + state.lineHeight else state.y;
      local placed = p { gridPos: { h: h, w: w, x: x, y: y } };
      {
        panels: state.panels + [placed],
        x: if p.type == 'row' then 24 else x + w,
        y: y,
        lineHeight: if wraps then h else std.max(state.lineHeight, h),
      };
    std.foldl(step, panels, { panels: [], x: 0, y: 0, lineHeight: 0 }).panels,

  // A query variable offering the values of `label` on `selector` (several or All).
  queryVariable(name, label, metricSelector):: {
    type: 'query',
    name: name,
    label: label,
    datasource: datasource,
    definition: 'label_values(%s, %s)' % [metricSelector, name],
    query: 'label_values(%s, %s)' % [metricSelector, name],
    current: { selected: true, text: ['All'], value: ['$__all'] },
    hide: 0,
    includeAll: true,
    allValue: '.+',
    multi: true,
    options: [],
    refresh: 2,
    regex: '',
    skipUrlSync: false,
    sort: 1,
  },

  datasourceVariable:: {
    type: 'datasource',
    name: 'datasource',
    label: 'Data source',
    query: 'prometheus',
    current: { selected: false, text: 'default', value: 'default' },
    hide: 0,
    includeAll: false,
    multi: false,
    options: [],
    refresh: 1,
    regex: '',
    skipUrlSync: false,
  },

  // A dashboard with the config's tags, refresh and time range, linking to the others.
  dashboard(config, uid, title, description, variables, panels):: {
    id: null,
    uid: uid,
    title: config.dashboardTitlePrefix + title,
    description: description,
    tags: config.dashboardTags,
    editable: false,
    fiscalYearStartMonth: 0,
    graphTooltip: 1,
    liveNow: false,
    refresh: config.dashboardRefresh,
    schemaVersion: 39,
    version: 1,
    time: { from: config.dashboardTimeFrom, to: 'now' },
    timepicker: {},
    timezone: config.dashboardTimezone,
    weekStart: '',
    annotations: { list: [] },
    links: [{
      type: 'dashboards',
      title: 'Ledger dashboards',
      tags: config.dashboardTags,
      asDropdown: true,
      includeVars: true,
      keepTime: true,
      icon: 'external link',
      targetBlank: false,
      tooltip: '',
      url: '',
    }],
    templating: { list: [$.datasourceVariable] + variables },
    panels: $.layout(panels),
  },
}
