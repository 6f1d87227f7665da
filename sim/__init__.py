"""cocotb testbenches and the simulation runner (cocotb_tools.runner on Verilator/Icarus)."""
