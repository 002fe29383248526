"""The reproducible images and the engine that runs them, a subsystem beside the run: `launcher`
(`./run.sh --container KIND ...`: finds or builds the image, runs `fusionbench run` in it with the
repository mounted read-only and the results and cache mapped in), `image_build` (an image built
with no registry, bit for bit the same from the same commit) and its parts `image_base` (Debian
from its own packages, by mmdebstrap), `image_tar` (deterministic layers), `image_archive` (the
image's config and archive), `image_prune` (removing images of recipes this checkout no longer
builds), `package_lock` (the images' hash-locked Python packages, made from requirements.lock),
`wheelhouse` (the hash-checked wheels an image installs), `image_verify` (an image built again
from nothing and compared), `offline_wheels` (`fusionbench wheels`: what a machine without network
installs beside its own torch, not an image's), and `engine` (a Docker engine of the project's
own where none runs), which reads the host through `host_processes`, `host_network` and
`host_folders`, and asks `engine_socket` (as the launcher does) whether an engine's socket refuses
this user. Nothing else in harness/ imports this package but the CLI; what goes into an image
(the recipes and locks) lives in containers/.
"""
