std.manifestYamlDoc((import 'mixin.libsonnet').prometheusRules)
