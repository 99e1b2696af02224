"""Table 6 at small scale, from the command line (`bert_tf_experiments.table6` says what it runs):

  python -m bert_tf_experiments.model_size [--output_dir=runs/model_size] [--input_file=my_corpus.txt]
      [--sizes=1x128x2,2x128x2,4x128x2,2x256x4] [the quickstart's flags but the model's size] [--force]
"""

from absl import flags

from bert_tf_experiments.table6 import DEFAULT_SIZES, SIZE_FLAGS
from bert_tf_quickstart import options

options.define_flags("runs/model_size", exclude=SIZE_FLAGS)  # --sizes gives every size
flags.adopt_module_key_flags(options)  # list them in --help, as this command's own
flags.DEFINE_list("sizes", ["x".join(map(str, size)) for size in DEFAULT_SIZES],
                  "Model sizes to compare, each LxHxA: layers x hidden size x attention heads (feed-forward 4H).")


def main(f):
    from bert_tf_experiments.table6 import parse_sizes, run_model_size

    sizes = parse_sizes(",".join(f.sizes))
    # QuickstartOptions wants a model size; each of --sizes replaces it
    run_model_size(f.output_dir, options.from_flags(f, **dict(zip(SIZE_FLAGS, sizes[0]))), f.input_file, f.force,
                   sizes)


def run():
    options.start_command("bert_tf_experiments.model_size", main)


if __name__ == "__main__":
    run()
