"""A MAC-learning switch as an os-ken (OpenFlow 1.3) application: what
users run to check a switch under a controller. Table miss sends whole
packets to the controller; a packet-in teaches where its source lives,
and once the destination is known a rule forwards that pair in the
switch itself (priority 1), so later packets never reach the controller.
"""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ether_types, ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # datapath id -> {MAC: port}
        self.where = {}

    def install(self, dp, priority, match, actions):
        parser, ofp = dp.ofproto_parser, dp.ofproto
        apply = parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority,
                                      match=match, instructions=[apply]))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_joined(self, ev):
        dp = ev.msg.datapath
        parser, ofp = dp.ofproto_parser, dp.ofproto
        self.logger.info("switch %016x joined", dp.id)
        to_me = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
        self.install(dp, 0, parser.OFPMatch(), [to_me])

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        parser, ofp = dp.ofproto_parser, dp.ofproto
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            return
        macs = self.where.setdefault(dp.id, {})
        macs[eth.src] = in_port
        out = macs.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst)
            self.install(dp, 1, match, actions)
            self.logger.info("learnt %s -> %s on port %s", eth.src, eth.dst, out)
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=in_port, actions=actions,
                                        data=msg.data))
