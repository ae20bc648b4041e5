#!/usr/bin/env python3
"""Cross-check of Trellis' GRC-Rank and WX100 simulator against Virne's method.

Not part of Trellis at run time: a verification aid (needs numpy, scipy, networkx).

It rebuilds Virne's WX100 instance for a seed exactly as Virne's code draws it
(virne/utils/dataset.py set_seed and generate_data_with_distribution,
virne/network/topology/topology_generator.py, virne/network/physical_network.py
from_setting, virne/network/virtual_network_request_simulator.py arrange_v_nets and
_renew_events), runs GRC-Rank as Virne does it (virne/solver/rank/node_rank.py GRCNodeRank,
virne/core/controller/node_mapper.py _safely_node_mapping,
virne/core/controller/link_mapper.py _safely_route,
virne/core/controller/topology_analyzer.py find_shortest_paths 'k_shortest'), prints
acceptance, LRC and LAR as Virne's counter does (virne/core/counter.py summary_records), and
writes the instance as a Trellis trace so `trellis-bench --parts embed --trace` runs our Go
code on the very same instance.

usage: virne_grc_check.py SEED [SEED...] [--eta 0.16] [--write-trace PREFIX]
"""
import argparse
import json
import random
from itertools import islice

import networkx as nx
import numpy as np


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)


def gen_p_net(seed):
    set_seed(seed)
    while True:
        g = nx.waxman_graph(100, 0.5, 0.2)  # beta=0.5, alpha=0.2, as Virne passes them
        if nx.is_connected(g):
            break
    cpu = np.random.randint(50, 101, g.number_of_nodes()).astype('int').tolist()
    bw = np.random.randint(50, 101, g.number_of_edges()).astype('int').tolist()
    edges = list(g.edges)
    return g, cpu, dict(zip(edges, bw)), edges


def gen_v_nets(seed, eta, num=1000):
    set_seed(seed)
    sizes = np.random.randint(2, 11, num).astype('int').tolist()
    lifetimes = np.random.exponential(500, num).astype('float').tolist()
    gaps = np.random.poisson(1 / eta, num).astype('float').tolist()
    arrivals = np.cumsum(gaps)
    v_nets = []
    for i in range(num):
        while True:
            g = nx.erdos_renyi_graph(sizes[i], 0.5, directed=False)
            if nx.is_connected(g):
                break
        cpu = np.random.randint(0, 21, g.number_of_nodes()).astype('int').tolist()
        bw = np.random.randint(0, 51, g.number_of_edges()).astype('int').tolist()
        v_nets.append({'id': i, 'arrival': float(arrivals[i]), 'lifetime': lifetimes[i],
                       'cpu': cpu, 'edges': list(g.edges), 'bw': bw})
    return v_nets


def grc_order(n, cap, edges, bw, d=0.85, sigma=1e-5):
    """GRCNodeRank.rank followed by the stable descending sort of NodeRank.to_dict."""
    cap = np.array(cap, dtype=float)
    with np.errstate(invalid='ignore', divide='ignore'):
        c = cap / cap.sum()
    m = np.zeros((n, n))
    for (u, v), w in zip(edges, bw):
        m[u, v] += w
        m[v, u] = m[u, v]
    rows = m.sum(axis=1)
    for i in range(n):  # networkx scales stored entries only: a zero row stays zero
        if rows[i] != 0:
            m[i] /= rows[i]
    c = c[None, :]
    r = c
    delta = np.inf
    while delta >= sigma:
        new = (1 - d) * c + d * r @ m
        delta = np.linalg.norm(new - r)
        r = new
    r = r.flatten()
    return [i for i, _ in sorted(((i, float(r[i])) for i in range(n)), reverse=True, key=lambda x: x[1])]


def run(seed, eta, trace_prefix=None):
    g, p_cpu0, p_bw0, p_edges = gen_p_net(seed)
    v_nets = gen_v_nets(seed, eta)
    if trace_prefix:
        write_trace(f'{trace_prefix}-{seed}.json', p_cpu0, p_edges, p_bw0, v_nets)
    events = [(v['arrival'], 1, v['id']) for v in v_nets] + [(v['arrival'] + v['lifetime'], 0, v['id']) for v in v_nets]
    events = sorted(events, key=lambda e: e[0])
    p_cpu = list(p_cpu0)
    p_bw = {}
    for (u, v), w in p_bw0.items():
        p_bw[(u, v)] = w
        p_bw[(v, u)] = w
    held = {}
    paths_cache = {}
    accepted = 0
    time_rev = time_cost = 0.0
    last_arrival = 0.0
    for t, kind, vid in events:
        vn = v_nets[vid]
        last_arrival = vn['arrival']
        if kind == 0:
            sol = held.pop(vid, None)
            if sol:
                for p, c in sol['nodes']:
                    p_cpu[p] += c
                for (u, v), w in sol['links']:
                    p_bw[(u, v)] += w
                    p_bw[(v, u)] += w
            continue
        sol = embed(g, p_cpu, p_bw, p_edges, vn, paths_cache)
        if sol is None:
            continue
        for p, c in sol['nodes']:
            p_cpu[p] -= c
        for (u, v), w in sol['links']:
            p_bw[(u, v)] -= w
            p_bw[(v, u)] -= w
        held[vid] = sol
        accepted += 1
        rev = sum(vn['cpu']) + sum(vn['bw'])
        cost = sum(vn['cpu']) + sol['link_cost']
        time_rev += rev * vn['lifetime']
        time_cost += cost * vn['lifetime']
    return accepted / len(v_nets), time_rev / time_cost, time_rev / last_arrival


def embed(g, p_cpu, p_bw, p_edges, vn, paths_cache):
    n = len(vn['cpu'])
    v_order = grc_order(n, vn['cpu'], vn['edges'], vn['bw'])
    p_order = grc_order(len(p_cpu), p_cpu, p_edges, [p_bw[e] for e in p_edges])
    cpu = list(p_cpu)
    slots = {}
    for v in v_order:
        for p in p_order:
            if vn['cpu'][v] <= cpu[p]:
                cpu[p] -= vn['cpu'][v]
                slots[v] = p
                p_order.remove(p)
                break
        else:
            return None
    bw = dict(p_bw)
    links, link_cost = [], 0
    for (a, b), demand in zip(vn['edges'], vn['bw']):
        pair = (slots[a], slots[b])
        if pair not in paths_cache:
            paths_cache[pair] = list(islice(nx.shortest_simple_paths(g, pair[0], pair[1]), 10))
        for path in paths_cache[pair]:
            hops = list(zip(path, path[1:]))
            if all(demand <= bw[h] for h in hops):
                for u, v in hops:
                    bw[(u, v)] -= demand
                    bw[(v, u)] -= demand
                    links.append(((u, v), demand))
                link_cost += demand * len(hops)
                break
        else:
            return None
    return {'nodes': [(slots[v], vn['cpu'][v]) for v in range(n)], 'links': links, 'link_cost': link_cost}


def write_trace(path, p_cpu, p_edges, p_bw, v_nets):
    tr = {'problem': 'vne',
          'substrate': {'nodes': [{'id': i, 'cpu': c} for i, c in enumerate(p_cpu)],
                        'links': [{'a': u, 'b': v, 'bw': p_bw[(u, v)]} for u, v in p_edges]},
          'requests': [{'id': v['id'], 'arrival': v['arrival'], 'lifetime': v['lifetime'],
                        'nodes': [{'cpu': c} for c in v['cpu']],
                        'links': [{'a': a, 'b': b, 'bw': w} for (a, b), w in zip(v['edges'], v['bw'])]}
                       for v in v_nets]}
    with open(path, 'w') as f:
        json.dump(tr, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('seeds', type=int, nargs='+')
    ap.add_argument('--eta', type=float, default=0.16)
    ap.add_argument('--write-trace')
    a = ap.parse_args()
    for s in a.seeds:
        acc, lrc, lar = run(s, a.eta, a.write_trace)
        print(f'seed {s}: acceptance {acc * 100:.1f} %  lrc {lrc:.4f}  lar {lar:.2f}', flush=True)


if __name__ == '__main__':
    main()
