"""The paper's section 5 experiments as drivers, at the size a workstation runs: `ablations` (Table 5, the
pre-training objectives) and `model_size` (Table 6). An application on top of the library, `data_gen` and the
quickstart (whose built-in corpus, stage runner and `word_order` task they share); nothing imports it."""
