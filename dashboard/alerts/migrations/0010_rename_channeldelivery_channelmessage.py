from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):
    """A channel's outgoing message is a ChannelMessage, not a "delivery" beside the domain's Delivery."""

    dependencies = [
        ("alerts", "0009_channel_message_token"),
    ]

    operations = [
        migrations.RenameModel("ChannelDelivery", "ChannelMessage"),
        migrations.AlterField(
            model_name="channelmessage",
            name="channel",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="alerts.channel"
            ),
        ),
        migrations.AlterField(
            model_name="channelmessage",
            name="incident",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                related_name="channel_messages", to="alerts.incident",
            ),
        ),
        migrations.AlterModelOptions(
            name="channelmessage",
            options={"ordering": ["-created_at", "-id"], "verbose_name_plural": "channel messages"},
        ),
    ]
