"""Where the appliance keeps its state and how processes find the embedded services."""
