//! The fusion plan, fixed when the crate compiles: which elementwise steps become one kernel,
//! and which sub-model call leaves its bias add to the kernel after it.
//!
//! A chain is a set of elementwise steps computed by one kernel. An elementwise step joins
//! the chain of an elementwise producer whose result it alone uses (used once, so the value
//! never needs to exist in memory); the chain's last step (its root) is the only result that
//! leaves it. A chain reads at most [`MAX_INPUTS`] tensors. When a chain's input comes from a
//! sub-model call used by nothing else, that call is made "deferred": it leaves its final
//! bias add to the chain's kernel (`Linear` + bias + activation: one GEMM and one kernel).

use super::parse::{Forward, Kind, MethodArg, Operand, Step};
use std::collections::HashMap;

/// The most tensors one fused kernel reads (the `rtx::compile::fused` functions go to 4).
pub const MAX_INPUTS: usize = 4;

/// A fused kernel: its steps (indices into the forward's steps, in order), its tensor
/// inputs, its uniforms, and the input whose producer deferred its bias, if any.
pub struct Chain {
    pub steps: Vec<usize>,
    pub inputs: Vec<Operand>,
    pub uniforms: Vec<syn::Path>,
    pub deferred: Option<usize>,
}

impl Chain {
    /// The step whose result leaves the chain.
    pub fn root(&self) -> usize {
        *self.steps.last().unwrap_or(&0)
    }
}

/// The plan: the chains, which chain each elementwise step belongs to, and which call
/// steps are deferred.
pub struct Plan {
    pub chains: Vec<Chain>,
    pub chain_of: HashMap<usize, usize>,
    pub deferred_calls: Vec<usize>,
    /// How many steps read each variable (the output counts once).
    pub uses: HashMap<String, usize>,
}

/// The tensor operands a step reads.
pub fn reads(s: &Step) -> Vec<&Operand> {
    match &s.kind {
        Kind::Elem { args, .. } | Kind::Call { args, .. } => args.iter().collect(),
        Kind::Method { recv, args, .. } => std::iter::once(recv)
            .chain(args.iter().filter_map(|a| match a {
                MethodArg::Tensor(t) => Some(t),
                MethodArg::Other(_) => None,
            }))
            .collect(),
    }
}

/// The key under which an operand is an input of a chain (a variable or a field).
fn input_key(op: &Operand) -> Option<String> {
    match op {
        Operand::Var(v) => Some(v.to_string()),
        Operand::Field(_, name) => Some(format!("self.{name}")),
        _ => None,
    }
}

pub fn plan(f: &Forward) -> Plan {
    let mut uses: HashMap<String, usize> = HashMap::new();
    for s in &f.steps {
        for op in reads(s) {
            if let Operand::Var(v) = op {
                *uses.entry(v.to_string()).or_default() += 1;
            }
        }
    }
    *uses.entry(f.output.to_string()).or_default() += 1;
    let index: HashMap<String, usize> = f
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.target.to_string(), i))
        .collect();

    // Grow chains in step order: each elementwise step starts as its own chain and absorbs
    // the chains of its single-use elementwise producers while the inputs stay few enough.
    let mut chain_of: HashMap<usize, usize> = HashMap::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (i, s) in f.steps.iter().enumerate() {
        let Kind::Elem { args, .. } = &s.kind else {
            continue;
        };
        let mut mine = vec![i];
        for op in args {
            let Operand::Var(v) = op else { continue };
            let Some(&p) = index.get(&v.to_string()) else {
                continue;
            };
            let Some(&c) = chain_of.get(&p) else { continue };
            if uses.get(&v.to_string()) != Some(&1) || members[c].is_empty() {
                continue;
            }
            let mut merged: Vec<usize> = members[c].iter().chain(&mine).copied().collect();
            merged.sort_unstable();
            merged.dedup();
            if chain_inputs(f, &merged).len() < MAX_INPUTS {
                mine = merged;
                members[c].clear();
            }
        }
        let id = members.len();
        for &m in &mine {
            chain_of.insert(m, id);
        }
        members.push(mine);
    }

    let mut chains = Vec::new();
    let mut renumber: HashMap<usize, usize> = HashMap::new();
    let mut deferred_calls = Vec::new();
    for (old, steps) in members.into_iter().enumerate() {
        if steps.is_empty() {
            continue;
        }
        renumber.insert(old, chains.len());
        let inputs = chain_inputs(f, &steps);
        let mut uniforms: Vec<syn::Path> = Vec::new();
        for &s in &steps {
            for op in reads(&f.steps[s]) {
                let text = |p: &syn::Path| quote::quote!(#p).to_string();
                if let Operand::Const(p) = op
                    && !uniforms.iter().any(|u| text(u) == text(p))
                {
                    uniforms.push(p.clone());
                }
            }
        }
        // A chain input made by a sub-model call that nothing else reads can take that
        // call's bias.
        let deferred = inputs.iter().position(|op| {
            let Operand::Var(v) = op else { return false };
            let Some(&p) = index.get(&v.to_string()) else {
                return false;
            };
            matches!(f.steps[p].kind, Kind::Call { each: None, .. })
                && uses.get(&v.to_string()) == Some(&1)
                && !deferred_calls.contains(&p)
        });
        if let Some(d) = deferred
            && let Operand::Var(v) = &inputs[d]
        {
            deferred_calls.push(index[&v.to_string()]);
        }
        chains.push(Chain {
            steps,
            inputs,
            uniforms,
            deferred,
        });
    }
    let chain_of = chain_of
        .into_iter()
        .filter_map(|(s, c)| renumber.get(&c).map(|&n| (s, n)))
        .collect();
    Plan {
        chains,
        chain_of,
        deferred_calls,
        uses,
    }
}

/// The tensors a set of elementwise steps reads from outside itself, in first-read order.
fn chain_inputs(f: &Forward, steps: &[usize]) -> Vec<Operand> {
    let inside: Vec<String> = steps
        .iter()
        .map(|&s| f.steps[s].target.to_string())
        .collect();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for &s in steps {
        for op in reads(&f.steps[s]) {
            let Some(key) = input_key(op) else { continue };
            if inside.contains(&key) || seen.contains(&key) {
                continue;
            }
            seen.push(key);
            out.push(op.clone());
        }
    }
    out
}
