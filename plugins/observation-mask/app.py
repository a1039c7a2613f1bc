"""The component's entry point: componentize-py instantiates `app.WitWorld`.

Build (from this folder, componentize-py 0.25.1):
    componentize-py -d ../../wit/0.2.0 -w strategy componentize app -p . -p ../../sdk/python -o dist/observation-mask.wasm
"""

from cairn_sdk import export_strategy
from observation_mask import ObservationMask

WitWorld = export_strategy(ObservationMask)
