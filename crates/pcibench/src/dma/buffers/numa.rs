//! DMA buffers on the device's NUMA node: each buffer's mapping prefers the node sysfs gives the
//! device (`numa_node`) before its first page is touched (`os::numa`), and where its pages landed
//! is counted once they are in (locked, or pinned by VFIO), for the report's context: a node
//! without free hugepages or memory gives pages elsewhere, which the context says.

use crate::os::mmap::Mmap;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// Where a run's DMA buffers are, against the device's node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferNode {
    /// The device's node, which the buffers were asked to come from.
    pub node: i32,
    /// Pages counted (of the buffers' page size: 2 MiB hugepages or base pages).
    pub pages: u64,
    pub on_node: u64,
    /// Pages on other nodes, by node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<(i32, u64)>,
    /// Why the node could not be asked for, or the pages not located.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl BufferNode {
    /// "DMA buffers on node 1 (all 4 pages)", or what went elsewhere.
    pub fn words(&self) -> String {
        if let Some(p) = &self.problem {
            return format!("DMA buffers not placed on node {} ({p})", self.node);
        }
        if self.elsewhere.is_empty() {
            return format!("DMA buffers on node {} (all {} pages)", self.node, self.pages);
        }
        let other: Vec<String> = self.elsewhere.iter().map(|(n, c)| format!("{c} on node {n}")).collect();
        format!("DMA buffers: {} of {} pages on node {}, {}", self.on_node, self.pages, self.node, other.join(", "))
    }

    /// A warning for the report when pages are not where the device is.
    pub fn warning(&self) -> Option<String> {
        if self.elsewhere.is_empty() && self.problem.is_none() {
            return None;
        }
        Some(format!(
            "{}: the device on node {n} reaches the others across the interconnect; reserve hugepages on its node \
             (echo 8 | sudo tee /sys/devices/system/node/node{n}/hugepages/hugepages-2048kB/nr_hugepages)",
            self.words(),
            n = self.node
        ))
    }
}

/// The device's node for every buffer an allocator makes, and the tally of where they went.
pub struct NodePolicy {
    node: u32,
    tally: Mutex<Option<BufferNode>>,
}

impl NodePolicy {
    /// A policy for a device on `node`; None where sysfs names none (-1: one node, or unknown).
    pub fn for_node(node: Option<i32>) -> Option<Arc<NodePolicy>> {
        let n = u32::try_from(node?).ok()?;
        Some(Arc::new(NodePolicy { node: n, tally: Mutex::new(None) }))
    }

    fn with(&self, f: impl FnOnce(&mut BufferNode)) {
        let mut t = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        f(t.get_or_insert_with(|| BufferNode { node: self.node as i32, ..BufferNode::default() }));
    }

    /// Before the first touch of `mem`: prefer the device's node.
    pub fn prefer(&self, mem: &Mmap) {
        if let Err(e) = crate::os::numa::prefer_node(mem.as_ptr(), mem.len(), self.node) {
            self.with(|t| t.problem = Some(format!("mbind: {e}")));
        }
    }

    /// Once `mem`'s pages are in: count them by node (`page`: the mapping's page size).
    pub fn record(&self, mem: &Mmap, page: usize) {
        match crate::os::numa::page_nodes(mem.as_ptr(), mem.len(), page) {
            Ok(nodes) => self.with(|t| {
                for n in nodes.into_iter().filter(|n| *n >= 0) {
                    t.pages += 1;
                    if n == t.node {
                        t.on_node += 1;
                    } else {
                        match t.elsewhere.iter_mut().find(|(x, _)| *x == n) {
                            Some((_, c)) => *c += 1,
                            None => t.elsewhere.push((n, 1)),
                        }
                    }
                }
                t.elsewhere.sort();
            }),
            Err(e) => self.with(|t| t.problem = Some(format!("move_pages: {e}"))),
        }
    }

    /// Where the buffers made so far are; None before the first.
    pub fn placement(&self) -> Option<BufferNode> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_say_where_the_pages_went() {
        let all = BufferNode { node: 1, pages: 4, on_node: 4, ..Default::default() };
        assert_eq!(all.words(), "DMA buffers on node 1 (all 4 pages)");
        assert_eq!(all.warning(), None);
        let some = BufferNode { node: 1, pages: 4, on_node: 1, elsewhere: vec![(0, 3)], problem: None };
        assert_eq!(some.words(), "DMA buffers: 1 of 4 pages on node 1, 3 on node 0");
        assert!(some.warning().unwrap().contains("/sys/devices/system/node/node1/hugepages"), "{some:?}");
        assert_eq!(NodePolicy::for_node(Some(-1)).map(|_| ()), None);
        assert_eq!(NodePolicy::for_node(None).map(|_| ()), None);
    }

    /// On this host, node 0: a buffer preferred there and touched is counted there.
    #[test]
    fn a_buffer_on_node_0_is_counted_there() {
        let p = NodePolicy::for_node(Some(0)).unwrap();
        let page = crate::os::mmap::page_size();
        let m = Mmap::anonymous(2 * page, false).unwrap();
        p.prefer(&m);
        m.lock().ok();
        m.write(0, crate::mmio::Width::B64, 1).unwrap();
        m.write(page as u64, crate::mmio::Width::B64, 1).unwrap();
        p.record(&m, page);
        let t = p.placement().unwrap();
        if t.problem.as_deref().is_some_and(|e| e.contains("os error 38")) {
            return; // no CONFIG_NUMA: no mbind, nothing to place
        }
        assert_eq!((t.node, t.pages, t.on_node, t.elsewhere.clone()), (0, 2, 2, vec![]), "{t:?}");
    }
}
