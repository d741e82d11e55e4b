"""Small documents the rag tests index: owls everyone reads, a secret, and something unrelated."""

from __future__ import annotations

OWLS = "# Owls\n\nOwls hunt mice at night in the forest. Their soft feathers make their flight silent.\n\nBarn owls nest in old barns."
SECRET = "# Secret\n\nOwls secretly hunt mice in the private barn. The barn code is 4711."
VOLCANO = "# Volcanoes\n\nVolcanoes erupt molten lava. Lava cools into basalt rock."
