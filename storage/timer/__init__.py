"""RocketMQ 5's timer store files: the wheel of slots (`timer_wheel.py`), the log of
timer units the slots chain through (`timer_log.py`) and the progress page
(`timer_checkpoint.py`), laid out byte for byte as RocketMQ 5.5.0 writes them, so a
store moved between RocketMQ and mqstore keeps its pending timers.  The writer's timer
schedule (services/writer/timer_schedule.py) is their one writer."""
