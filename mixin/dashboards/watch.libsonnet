// Ledger / Watched contracts and wallets: the objects of the exporter's watch list.
local g = import '../lib/grafana.libsonnet';
local r = import '../lib/replicas.libsonnet';

{
  grafanaDashboards+:: {
    'ledger-watch.json':
      local c = $._config;
      // A node series as an HA pair's replicas agree (lib/replicas.libsonnet): one per node.
      local f(metric, s) = r.read(c, metric, s);
      local pick = 'job=~"$job", instance=~"$instance"';
      local L = '%s, %s' % [c.ledgerSelector, pick];
      local N = L + ', node=~"$node"';
      local B = N + ', blockchain=~"$blockchain"';
      local K = B + ', contract=~"$contract"';
      local W = B + ', wallet=~"$wallet"';
      local perContract = '{{node}} {{contract}}';
      local perWallet = '{{node}} {{wallet}}';
      g.dashboard(
        c,
        'ledger-watch',
        'Watched contracts and wallets',
        "The contracts and wallets of the exporter's watch list, as each node reports them: status, version and code hash, chosen state values, wallets' enabled flag and permissions, and where nodes disagree.",
        [
          g.queryVariable('job', 'Job', 'ledger_node_up{%s}' % c.ledgerSelector),
          g.queryVariable('instance', 'Instance', 'ledger_node_up{%s, job=~"$job"}' % c.ledgerSelector),
          g.queryVariable('node', 'Node', 'ledger_node_up{%s}' % L),
          g.queryVariable('blockchain', 'Blockchain', 'ledger_blockchain_up{%s}' % N),
          g.queryVariable('contract', 'Contract', 'ledger_contract_up{%s}' % B),
          g.queryVariable('wallet', 'Wallet', 'ledger_wallet_up{%s}' % B),
        ],
        [
          g.row(1, 'Contracts'),
          g.stat(
            2,
            'Contracts not ACTIVE',
            'Watched contracts (per node) whose status is anything but ACTIVE.',
            [g.target('count(%s == 1) or vector(0)' % f('ledger_contract_status', K + ', status!="ACTIVE"'), 'not active')],
            steps=g.thresholds('green', [[1, 'orange']]),
          ),
          g.stat(
            3,
            'Contracts with disagreeing nodes',
            'Watched contracts whose nodes report more than one status (LedgerWatchedContractNodesDisagree).',
            [g.target('count(count by (blockchain, contract) (count by (blockchain, contract, status) (ledger_contract_status{%s} == 1)) > 1) or vector(0)' % K, 'disagreeing')],
            steps=g.thresholds('green', [[1, 'orange']]),
          ),
          g.stat(
            4,
            'Wallets disabled',
            'Watched wallets (per node) that report enabled: false.',
            [g.target('count(%s == 0) or vector(0)' % f('ledger_wallet_enabled', W), 'disabled')],
            steps=g.thresholds('green', [[1, 'orange']]),
          ),
          g.stat(
            5,
            'Wallets with disagreeing nodes',
            'Watched wallets whose nodes report a different enabled flag (LedgerWatchedWalletNodesDisagree).',
            [g.target('count((max by (blockchain, wallet) (ledger_wallet_enabled{%s}) - min by (blockchain, wallet) (ledger_wallet_enabled{%s})) > 0) or vector(0)' % [W, W], 'disagreeing')],
            steps=g.thresholds('green', [[1, 'orange']]),
          ),
          g.stateTimeline(
            6,
            'Contract read',
            "1 when the exporter read the contract's metadata from the node in that cycle (ledger_contract_up).",
            [g.target(f('ledger_contract_up', K), perContract)],
            g.boolMapping(['not read', 'red'], ['read', 'green']),
            size=[12, 6],
          ),
          g.stateTimeline(
            7,
            'Contract ACTIVE',
            '1 while the node reports the contract ACTIVE; the status table says what else it reports.',
            [g.target(f('ledger_contract_status', K + ', status="ACTIVE"'), perContract)],
            g.boolMapping(['not ACTIVE', 'orange'], ['ACTIVE', 'green']),
            size=[12, 6],
          ),
          g.table(
            8,
            'Contract status now',
            'The status each node reports for each watched contract (ledger_contract_status == 1).',
            [g.tableTarget('%s == 1' % f('ledger_contract_status', K))],
            ['node', 'blockchain', 'contract', 'status'],
            hide=['Value', 'instance', 'job'],
            size=[12, 7],
          ),
          g.table(
            9,
            'Contract identity',
            'Address, VM type and code hash each node reports (ledger_contract_info); a node with another code hash is out of step.',
            [g.tableTarget(f('ledger_contract_info', K))],
            ['node', 'blockchain', 'contract', 'address', 'vm_type', 'code_hash'],
            hide=['Value', 'instance', 'job'],
            renames={ code_hash: 'code hash', vm_type: 'VM' },
            size=[12, 7],
          ),
          g.timeseries(
            10,
            'Contract version',
            "The contract's version per node (ledger_contract_version); a step is an upgrade.",
            [g.target(f('ledger_contract_version', K), perContract)],
            softMin=false,
            size=[24, 7],
          ),
          g.row(11, 'Contract state'),
          g.stateTimeline(
            12,
            'State read',
            "1 when the exporter read the contract's state from the node in that cycle (ledger_contract_state_up).",
            [g.target(f('ledger_contract_state_up', K), perContract)],
            g.boolMapping(['not read', 'red'], ['read', 'green']),
            size=[12, 6],
          ),
          g.timeseries(
            13,
            'State version',
            "Version of the contract's state per node (ledger_contract_state_version); it climbs as the contract is used.",
            [g.target(f('ledger_contract_state_version', K), perContract)],
            softMin=false,
            size=[12, 6],
          ),
          g.timeseries(
            14,
            'State values',
            'The configured state_keys per node (ledger_contract_state_value; booleans as 0/1).',
            [g.target(f('ledger_contract_state_value', K), perContract + ' {{key}}')],
            softMin=false,
            size=[24, 8],
          ),
          g.row(15, 'Wallets'),
          g.stateTimeline(
            16,
            'Wallet read',
            '1 when the exporter read the wallet from the node in that cycle (ledger_wallet_up).',
            [g.target(f('ledger_wallet_up', W), perWallet)],
            g.boolMapping(['not read', 'red'], ['read', 'green']),
            size=[12, 6],
          ),
          g.stateTimeline(
            17,
            'Wallet enabled',
            "The wallet's enabled flag per node (ledger_wallet_enabled).",
            [g.target(f('ledger_wallet_enabled', W), perWallet)],
            g.boolMapping(['disabled', 'red'], ['enabled', 'green']),
            size=[12, 6],
          ),
          g.table(
            18,
            'Permissions',
            "Each auth group's create/read/update/delete flag per node (ledger_wallet_permission: 1 granted, 0 not).",
            [g.tableTarget(f('ledger_wallet_permission', W))],
            ['node', 'blockchain', 'wallet', 'group', 'permission', 'Value'],
            hide=['instance', 'job'],
            renames={ Value: 'granted' },
          ),
          g.table(
            19,
            'Wallet identity',
            'Address, key type and public key each node reports (ledger_wallet_info).',
            [g.tableTarget(f('ledger_wallet_info', W))],
            ['node', 'blockchain', 'wallet', 'address', 'key_type', 'public_key'],
            hide=['Value', 'instance', 'job'],
            renames={ key_type: 'key type', public_key: 'public key' },
          ),
          g.timeseries(
            20,
            'Satellite wallets',
            'Number of satellite wallets per node (ledger_wallet_satellite_wallets).',
            [g.target(f('ledger_wallet_satellite_wallets', W), perWallet)],
            softMin=false,
            size=[24, 6],
          ),
        ],
      ),
  },
}
