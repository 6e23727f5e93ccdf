"""The serving core: what every front end shares, with no transport in it.

    model ← engine ← service ← {server (HTTP), web, wyoming, cli, audiobook}

Models and their roles (`pool`), admission and the queue (`admission`), voice resolution
(`voices`), request planning (`planning`) and one scheduler per engine (`scheduler`) that runs
every admitted request through that engine's batch, a frame at a time. Front ends turn their own
requests into a `SpeechInput`, plan it, submit it and read audio chunks back from a
`Generation`. No FastAPI or pydantic here: errors are ownvoice's own exceptions, and statuses
belong to the front ends.
"""
