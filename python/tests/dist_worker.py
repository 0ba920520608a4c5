"""One rank of test_dist.py: loads a collectives package with anvil.load (the world joined from
the launcher's environment, as `anvil run` joins it), runs it on x.npy and writes out<RANK>.npy."""

import os
import sys

import numpy as np

import anvil

package, x_path, out_dir = sys.argv[1:4]
model = anvil.load(package, backend="gloo")
assert anvil._anvil.world_initialized()
y = model(np.load(x_path))
np.save(os.path.join(out_dir, f"out{os.environ.get('RANK', '0')}.npy"),
        y[0] if isinstance(y, tuple) else y)
