//! The node's answer to [`nfv_ports::Routes`]: where the flow table sends
//! a port's packets, by port name. Ports that adapt to the rules (an
//! AF_XDP port with `zero_copy = "auto"`) ask it from their own control
//! threads; the answer is recomputed only when the table's version or
//! the set of ports changed.

use nfv_flow::PortNo;
use nfv_flow::table::SharedFlowTable;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub(crate) struct NodeRoutes {
    table: Arc<SharedFlowTable>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Port names by number (the ports that run).
    names: BTreeMap<PortNo, String>,
    /// Answers for the table generation `version`, by asking port.
    version: Option<u64>,
    answers: BTreeMap<PortNo, Option<PortNo>>,
}

impl NodeRoutes {
    pub(crate) fn new(table: Arc<SharedFlowTable>) -> NodeRoutes {
        NodeRoutes {
            table,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn port_added(&self, no: PortNo, name: &str) {
        self.state().names.insert(no, name.to_string());
    }

    pub(crate) fn port_removed(&self, no: PortNo) {
        self.state().names.remove(&no);
    }
}

impl nfv_ports::Routes for NodeRoutes {
    fn sole_destination(&self, port: u16) -> Option<String> {
        let mut st = self.state();
        let version = self.table.version();
        if st.version != Some(version) {
            st.version = Some(version);
            st.answers.clear();
        }
        let to = match st.answers.get(&port) {
            Some(&a) => a,
            None => {
                let a = self.table.snapshot().classifier.sole_output(port);
                st.answers.insert(port, a);
                a
            }
        }?;
        st.names.get(&to).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_flow::parse_flow;
    use nfv_ports::Routes;

    /// (flows installed so far, the answer for port 1 after them)
    const STEPS: &[(&[&str], Option<&str>)] = &[
        (&[], None),
        (&["priority=10,in_port=1,actions=output:2"], Some("vnf1")),
        (&["priority=20,in_port=1,arp,actions=output:3"], None),
        (
            &["priority=30,in_port=1,arp,actions=output:2"],
            Some("vnf1"),
        ),
        // A port number no port has: nothing to borrow from.
        (&["priority=40,in_port=1,actions=output:9"], None),
    ];

    #[test]
    fn answers_follow_rule_changes_and_name_the_port() {
        let table = Arc::new(SharedFlowTable::new());
        let routes = NodeRoutes::new(table.clone());
        routes.port_added(1, "eth0");
        routes.port_added(2, "vnf1");
        routes.port_added(3, "vnf2");
        for &(flows, want) in STEPS {
            table.add_flows(flows.iter().map(|f| parse_flow(f).unwrap()));
            assert_eq!(
                routes.sole_destination(1).as_deref(),
                want,
                "after {flows:?}"
            );
        }
        table.del_flows(&nfv_flow::parse_filter("priority=40,in_port=1").unwrap());
        assert_eq!(routes.sole_destination(1).as_deref(), Some("vnf1"));
        routes.port_removed(2);
        assert_eq!(routes.sole_destination(1), None, "the port went away");
    }
}
