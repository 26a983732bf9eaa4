"""Fleets: the same sweep on several database hosts, and TPC-C driver shards on several client hosts.

Orchestrated by Ansible (ansible-core, through ansible-runner), with playbooks shipped in
``tuner/fleet/playbooks`` that also work with ``ansible-playbook`` directly.  See docs/fleet.md.
"""
