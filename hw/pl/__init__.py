"""Amaranth 0.5 PL components. Verilog is generated into build/, never committed."""
